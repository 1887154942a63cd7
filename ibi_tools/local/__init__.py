"""Local mode: the Lambda handlers on loopback, over DynamoDB-compatible servers on loopback."""
