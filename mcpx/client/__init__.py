"""The way to a running daemon from another process (its info file, its token, `/v1`): used by the
CLI's commands and by the console, importing neither."""
