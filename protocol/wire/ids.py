"""What a party may choose as an id, and what a command may hold.

Ids a framework picks (task and executor ids, its reply address) end up as path
components on a slave and as MQTT topic segments; commands end up in `execve`. Both are
checked here, once, by the rules Mesos applies (`common/validation.cpp`, `validateID`),
so that the master refuses them with a reason and the slave can check them again.
"""

from __future__ import annotations

import re

from protocol.wire.health import CommandCheck
from protocol.wire.messages import CommandInfo, TaskInfo
from protocol.wire.reservations import parse_key

MAX_ID = 200  # characters, as every Id on the wire
# bytes of an id in UTF-8: a task's is its sandbox's name on its slave (with a `%` before
# it at most: slave.paths), and a file's name is at most 255 bytes (NAME_MAX)
MAX_ID_BYTES = 254
MAX_COMMAND = 64 * 1024  # bytes of a command's text (far below the kernel's ARG_MAX)
MAX_ENVIRONMENT = 64 * 1024  # bytes of a command's environment, names and values
MQTT_WILDCARDS = "+#"
MAX_IMAGE = 255  # characters of an image reference, as Docker's
# An image reference as Docker's grammar has it, narrowed: [host[:port]/]path[:tag][@digest],
# lowercase names. It starts with a letter or digit, so it never reads as an option of the
# podman command line it ends up in.
IMAGE = re.compile(
    r"[a-z0-9][a-z0-9._-]*(?::[0-9]{1,5})?"  # the first component (a registry, or a name)
    r"(?:/[a-z0-9][a-z0-9._-]*)*"  # the path
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"  # the tag
    r"(?:@sha256:[a-f0-9]{64})?"  # the digest
)


def id_problem(value: str, what: str = "id") -> str | None:
    """Why `value` is not a valid id (Mesos's rules), or None."""
    if not value:
        return f"{what} must not be empty"
    if len(value) > MAX_ID:
        return f"{what} must be at most {MAX_ID} characters"
    if value in (".", ".."):
        return f"{what} must not be '.' or '..'"
    if "/" in value or "\\" in value:
        return f"{what} must not contain '/' or '\\'"
    for c in value:
        if c.isspace():
            return f"{what} must not contain whitespace"
        if not c.isprintable():  # NUL and every other control or unassigned character
            return f"{what} must not contain control characters"
    if len(value.encode()) > MAX_ID_BYTES:  # (printable: no surrogate is left to encode)
        return f"{what} must be at most {MAX_ID_BYTES} bytes in UTF-8"
    return None


def reply_problem(value: str, what: str = "reply address") -> str | None:
    """An id that also becomes an MQTT topic segment: no wildcards either."""
    if any(c in value for c in MQTT_WILDCARDS):
        return f"{what} must not contain the MQTT wildcards '+' or '#'"
    return id_problem(value, what)


def check_id(value: str, what: str = "id") -> str:
    """`value`, or ValueError saying which rule it breaks."""
    problem = id_problem(value, what)
    if problem is not None:
        raise ValueError(f"{problem}: {shorten(value)}")
    return value


def command_problem(command: CommandInfo | CommandCheck, what: str = "command") -> str | None:
    """Why `command` cannot be handed to execve, or None: NUL bytes, '=' or nothing in an
    environment name, or more than the size bounds."""
    if "\0" in command.value:
        return f"{what} must not contain NUL bytes"
    if len(command.value.encode()) > MAX_COMMAND:
        return f"{what} must be at most {MAX_COMMAND} bytes"
    size = 0
    for name, value in command.environment.items():
        if not name or "=" in name or "\0" in name:
            return (
                f"{what}'s environment name {shorten(name)} must be non-empty, without '=' or NUL"
            )
        if "\0" in value:
            return f"{what}'s environment value of {shorten(name)} must not contain NUL bytes"
        size += len(name.encode()) + len(value.encode()) + 2
    if size > MAX_ENVIRONMENT:
        return f"{what}'s environment must be at most {MAX_ENVIRONMENT} bytes"
    return None


def image_problem(image: str) -> str | None:
    """Why `image` is not an image reference the slave hands to podman, or None."""
    if len(image) > MAX_IMAGE:
        return f"image must be at most {MAX_IMAGE} characters"
    if IMAGE.fullmatch(image) is None:
        return (
            f"image {shorten(image)} is not an image reference: [host[:port]/]name[:tag], "
            "lowercase, starting with a letter or digit"
        )
    return None


def task_problem(task: TaskInfo) -> str | None:
    """What in a task's ids, command, image or executor could not be used as given, or
    None."""
    problem = id_problem(task.task_id, "task id")
    if problem is None and task.command is not None:
        problem = command_problem(task.command)
    if problem is None and task.container is not None:
        problem = image_problem(task.container.image)
        if problem is None and task.executor is not None:
            problem = "an image runs a command task: a custom executor's task cannot name one"
    if problem is None and task.executor is not None:
        problem = id_problem(task.executor.executor_id, "executor id") or command_problem(
            task.executor.command, "executor command"
        )
        named = (*task.resources.millis, *task.executor.resources.millis)
        volume = next((k for k in named if parse_key(k).volume), None)
        if problem is None and volume is not None:  # (its executor would not see it)
            problem = (
                f"{volume} is a persistent volume: a command task's alone (a custom "
                "executor and its tasks would not see it, and what they wrote there would "
                "not last)"
            )
    check = task.health_check.command if task.health_check is not None else None
    if problem is None and check is not None:  # (run as the task runs: its bounds too)
        problem = command_problem(check, "health check command")
    return problem


def shorten(text: str, limit: int = 80) -> str:
    """Another party's text, quoted and cut to `limit` characters, for messages and logs."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + f"...(+{len(text) - limit} chars)"
