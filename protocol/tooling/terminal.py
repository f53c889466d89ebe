"""Other parties' text on an operator's terminal.

What a tenant chose (its ids, its framework's name, words of a refusal that quote what it
sent) reaches the commands an operator runs (`drfmesos events`, `state`, `why`) and the
master's own log on a terminal. A terminal obeys what it is sent: ESC and the other
control characters clear the screen, rewrite lines, set the window's title, or (OSC 52)
fill the clipboard; bidirectional overrides and zero-width characters make text read as
other text. So every such string is printed through `printable`: each character that is
not printable (`str.isprintable`: controls, formats such as U+202E, separators other than
the space) is written as its escape, `\\x1b`, `\\u202e`: the operator reads the bytes the
tenant sent, and the terminal obeys none of them.
"""

from __future__ import annotations


def printable(text: str, *, spaces: bool = True) -> str:
    """`text` with every character that is not printable escaped (`\\x1b`, `\\n`,
    `\\u202e`); without `spaces`, the space too (`\\x20`), for a value that never holds
    one (an id) printed among others separated by spaces, which a space in it would fake."""
    if text.isprintable() and (spaces or " " not in text):
        return text  # (nearly always: one pass in C)
    return "".join(c if c.isprintable() and (spaces or c != " ") else _escape(c) for c in text)


def _escape(c: str) -> str:
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
