"""`AskWhy` over the bus: an operator asks about any framework, a framework principal about
its own (another tenant's is unknown to it, in the words an unknown one gets). The answer,
`Why`, goes to the asker's answers topic (`master.why_answers` makes it)."""

from __future__ import annotations

from collections.abc import Callable

from master.authz import Caller
from master.why_answers import Refusal, WhyAnswers
from protocol.wire.messages import Wire
from protocol.wire.why import AskWhy

Refuse = Callable[[Caller, str, str, str], None]  # (caller, message, code, about)
Post = Callable[[str, Wire], None]  # (topic, message)


class WhyCalls:
    def __init__(self, answers: WhyAnswers, refuse: Refuse, post: Post) -> None:
        self.answers = answers
        self._refuse = refuse  # the master's refusal: an Error, a log line, a count
        self._post = post  # to a topic inside the asker's outbox (or its HTTP stream)

    async def on_ask_why(self, msg: AskWhy, caller: Caller) -> None:
        found = self.answers.find(msg.framework, caller.kind, caller.principal)
        if isinstance(found, Refusal):
            self._refuse(caller, found.message, found.code, AskWhy.TYPE)
            return
        if caller.reply_to:
            answer = self.answers.answer(
                found,
                msg.request_id,
                operator=caller.kind == "operator",
                principal=caller.principal,
            )
            if isinstance(answer, Refusal):
                self._refuse(caller, answer.message, answer.code, AskWhy.TYPE)
            else:
                self._post(caller.reply_to, answer)
