"""`python -m rag.ingest`."""
