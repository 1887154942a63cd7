"""The edge's origin check: the authorizer of the public routes behind CloudFront."""
