"""The SQLite session store."""
