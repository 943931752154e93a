"""Models: the seam an agent talks to a model through, the OpenAI-compatible endpoint
client and its server-sent events, and the offline model that needs no network.
"""
