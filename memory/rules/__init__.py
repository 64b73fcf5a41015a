"""Memory's rules as plain Python: no Django, no database."""
