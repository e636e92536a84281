import pytest

from graph_ingest.stack.java import parse_major


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "25" 2025-09-16', 25),
        ('java version "1.8.0_412"', 8),
        ('openjdk version "21.0.2-ea" 2024-01-16', 21),
        ("something else", None),
    ],
)
def test_parse_major(output: str, major: int | None) -> None:
    assert parse_major(output) == major
