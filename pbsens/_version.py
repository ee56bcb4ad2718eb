"""The version of pbsens, here so that any module can read it without importing the package face."""
__version__ = "0.1.0"
