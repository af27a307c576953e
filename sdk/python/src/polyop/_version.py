"""The SDK's name and version, sent to the host in DescribeResponse."""

from __future__ import annotations

__all__ = ["SDK_NAME", "__version__"]

SDK_NAME = "polyop-python"
"""The SDK's name, DescribeResponse.sdk_name."""

__version__ = "0.1.0"
"""The SDK's version, DescribeResponse.sdk_version: the version in
pyproject.toml (a test keeps them in step)."""
