"""`python -m rag.fetch MODEL`: make an embedding model ready (fetched if opt-in, exported)."""
