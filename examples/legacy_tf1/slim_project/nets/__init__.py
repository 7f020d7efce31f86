"""The slim digits project's networks."""
