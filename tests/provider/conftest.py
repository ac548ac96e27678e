"""The provider-shaped double every test here reaches: an OpenAI-compatible server on loopback."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.provider.stub import StubProvider, serve

KEY = "sk-stub-0123456789abcdef"


@pytest.fixture
def stub() -> Iterator[StubProvider]:
    provider = StubProvider(key=KEY)
    server = serve(provider)
    yield provider
    server.shutdown()
    server.server_close()
