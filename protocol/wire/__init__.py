"""The wire format: what parties say to each other (messages, resources, ids), how it is
encoded (codec), and where it goes (topics). Imports nothing else of ours."""
