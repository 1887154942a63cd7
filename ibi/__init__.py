"""ibi: a serverless implementation of the IBI (Internet Based Identifier) system."""

__version__ = "0.1.0"
