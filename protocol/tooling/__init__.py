"""Not the wire: running brokers, the credentials store and its CA, the embedded broker's
auth plugins, and the click options every command shares."""
