"""The console's k9s-style views beside the tasks list: `:questions`, `:hosts`, `:upstreams`,
`:events` (command.py completes the names), each a screen that keeps its own filter."""
