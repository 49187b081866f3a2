"""Input data for the input-pipeline checks: a synthetic JPEG dataset on disk, cached."""
