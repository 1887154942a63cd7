"""What every Lambda shares above the IBI core: its HTTP edge, DynamoDB plumbing, defaults."""
