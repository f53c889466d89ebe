"""Sample frameworks: the blog's drf-demo, and a framework that runs a command N times."""
