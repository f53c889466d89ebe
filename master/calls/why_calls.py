"""`AskWhy` over the bus: an operator asks about any framework, a framework principal about
its own (another tenant's is unknown to it, in the words an unknown one gets). The answer,
`Why`, goes to the asker's answers topic (`master.why_answers` makes it)."""

from __future__ import annotations

from master.authz import Caller
from master.shell import MasterShell
from master.why_answers import NotFound, WhyAnswers
from protocol.wire.why import AskWhy


class WhyCalls:
    def __init__(self, shell: MasterShell, answers: WhyAnswers) -> None:
        self.shell = shell
        self.answers = answers

    async def on_ask_why(self, msg: AskWhy, caller: Caller) -> None:
        found = self.answers.find(msg.framework, caller.kind, caller.principal)
        if isinstance(found, NotFound):
            self.shell.refuse(caller, found.message, found.code, AskWhy.TYPE)
            return
        if caller.reply_to:
            self.shell.post_to_framework_topic(
                caller.reply_to, self.answers.answer(found, msg.request_id)
            )
