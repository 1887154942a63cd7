"""The Archive's domain, pure (issue 36): what an item is, declared once; no I/O here."""
