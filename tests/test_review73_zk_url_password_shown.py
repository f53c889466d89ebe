"""Review 73: a `--zk` password with a `#`, a `?` or an unencoded `/` is shown in part,
or taken for a host.

`ZkURL.parse` splits the URL with `urllib.parse.urlsplit` before it looks for the
credentials, so the netloc ends at the first `/`, `?` or `#` of the password. Then:

- `zk://master:ab#cd@zk1:2181/p` (docs ask to percent-encode `@`, `:` and `/`; not `#` or
  `?`, common in a person's password) is refused with `'master:ab' is not HOST:PORT`: the
  password's head is in the error, printed by click to the terminal and to whatever
  collects the master's stderr;
- `zk://master:12345/xy@zk1:2181/p` (a `/` left unencoded) is no error at all: `master`
  port 12345 is taken for ZooKeeper's host, with no credentials, and the master logs
  `zookeeper.unreachable hosts=master:12345` while it retries, for ever.

What an operator relies on (docs/how-to/high-availability.md): "No log line or error
shows the password"; a malformed `--zk` is refused at start.
"""

from __future__ import annotations

import pytest

from master.ha.zookeeper import ZkURL


@pytest.mark.parametrize("password", ["ab#cd", "pa?ss", "pa/ss", "12345/xy"])
def test_a_password_is_taken_whole_or_refused_showing_none_of_it(password: str) -> None:
    url = f"zk://master:{password}@zk1:2181/drfmesos"
    head = password[:2]
    try:
        parsed = ZkURL.parse(url)
    except ValueError as e:
        assert f"master:{head}" not in str(e), f"the error shows the password's head: {e}"
        return
    assert (parsed.hosts, parsed.credentials) == ("zk1:2181", f"master:{password}"), (
        f"{password!r} read as hosts {parsed.hosts!r}, credentials {parsed.credentials!r}"
    )
