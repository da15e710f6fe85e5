"""`python -m ui`: the chat page on http://127.0.0.1:7860."""
