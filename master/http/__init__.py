"""The master's HTTP side: the API, its models and OpenAPI, metrics, the live feed and the page."""
