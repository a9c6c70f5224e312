"""Unit tests import the collection as ``ansible_collections.harvester.upgrade`` (tests/conftest.py
puts the repository root on ``sys.path``)."""
