"""Harbor environments of our own, loaded by Harbor through their import path."""
