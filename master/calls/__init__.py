"""The master's call handlers: what frameworks, slaves and operators may ask."""
