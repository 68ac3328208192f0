"""The repository as a whole: its layering, its docs' links, packaging and deployment."""
