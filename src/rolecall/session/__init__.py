"""A session as plain data (state.py) and as a stored document (document.py)."""
