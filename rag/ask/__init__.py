"""`python -m rag.ask`."""
