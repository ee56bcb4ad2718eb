"""sensitivity"""
