"""How messages travel: the MQTT bus, the executor's socketpair channel, following the leader."""
