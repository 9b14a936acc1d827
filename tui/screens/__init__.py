"""The TUI's screens: runs, one run, its failures and an item, its confirmations, and the ask dialog."""
