"""One page session's questions, answered one at a time in the order they were asked.

A question sent while another is being answered is shown at once, marked as waiting, and
answered after it: never dropped. The chat lives here rather than in the browser's copy,
which an answer streaming into the page would overwrite with its own older copy.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rag.answer import Answer
from rag.chat import Conversation

THINKING = "…"
WAITING = "⏳ *Waiting: answered once the question above is.*"

# One lock for every session: each hold is a few list operations, and a lock of each
# session's own would stop Gradio from copying a new session's starting value.
_LOCK = threading.Lock()


@dataclass
class Turn:
    """A question, the filters it was asked with, and the chat message its answer goes in."""

    question: str
    track: str | None
    author: str | None
    backend: str
    reply: dict[str, Any]
    epoch: int
    answer: Answer | None = None
    answered: bool = False


@dataclass
class ChatSession:
    """The chat of one page session (gr.State): its messages, conversation and queue."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    conversation: Conversation = field(default_factory=Conversation)
    waiting: deque[Turn] = field(default_factory=deque)
    answering: bool = False
    epoch: int = 0  # counts "New conversation"s: a turn of an earlier one is not shown

    def ask(
        self,
        question: str,
        track: str | None = None,
        author: str | None = None,
        backend: str = "",
        history: list[dict[str, Any]] | None = None,
    ) -> Turn:
        """Queue a question; its message says it waits until an answer starts on it.

        `history` is the caller's chat, taken when this session has none of its own (an API
        client's first question)."""
        with _LOCK:
            if not self.messages and history:
                self.messages.extend(dict(m) for m in history)
            reply = {"role": "assistant", "content": WAITING}
            self.messages += [{"role": "user", "content": question}, reply]
            turn = Turn(question, track, author, backend, reply, self.epoch)
            self.waiting.append(turn)
            return turn

    def start(self) -> bool:
        """Whether the caller is now the one answering; False if another already is."""
        with _LOCK:
            if self.answering:
                return False
            self.answering = True
            return True

    def next(self) -> Turn | None:
        """The next question for the one answering, or None, which ends its turn: checked and
        released together, so a question queued meanwhile is never left unanswered."""
        with _LOCK:
            if self.waiting:
                turn = self.waiting.popleft()
                turn.reply["content"] = THINKING
                return turn
            self.answering = False
            return None

    def stop(self) -> None:
        """Release the answering after an error or a closed page (next() did not)."""
        with _LOCK:
            self.answering = False

    def show(self, turn: Turn, text: str) -> None:
        with _LOCK:
            turn.reply["content"] = text

    def done(self, turn: Turn, answer: Answer | None) -> None:
        with _LOCK:
            turn.answer, turn.answered = answer, True

    def current(self, turn: Turn) -> bool:
        """Whether the turn belongs to the conversation on the page (no "New" since)."""
        return turn.epoch == self.epoch

    def reset(self) -> None:
        """A new conversation: messages, history and questions still waiting dropped."""
        with _LOCK:
            self.messages = []
            self.conversation = Conversation()
            for turn in self.waiting:
                turn.answered = True
            self.waiting.clear()
            self.epoch += 1

    def render(self, until: Turn | None = None) -> list[dict[str, Any]]:
        """A copy of the chat for the page (up to `until`'s answer), safe from the thread
        that streams into it."""
        with _LOCK:
            messages = self.messages
            if until is not None and until.epoch == self.epoch:
                end = next(i for i, m in enumerate(messages) if m is until.reply)
                messages = messages[: end + 1]
            return [dict(m) for m in messages]
