"""NumPy reference implementations: float64, readable, loops allowed where they teach."""
