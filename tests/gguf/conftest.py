import pytest


@pytest.fixture(scope="session")
def default_model():
    """Path of the embedded default model (Gemma 3 270M Q4_K_M); skips if not installed."""
    from ds4.default_model import default_model_path

    try:
        return default_model_path()
    except FileNotFoundError as e:
        pytest.skip(str(e))
