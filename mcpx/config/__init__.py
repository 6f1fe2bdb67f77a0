"""The config: its models, loading, env expansion, the keys other hosts write, the generated
reference, and the state folder's shared files. At the bottom: every room reads it, it imports
none of them."""
