"""The SDK's tests (a package, so that they can share fixtures by import)."""
