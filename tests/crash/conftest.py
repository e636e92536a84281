from tests.integration.conftest import pipeline

__all__ = ["pipeline"]
