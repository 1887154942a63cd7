"""The shapes of the DynamoDB calls the stores make: local mode's tables answer these only.

Generated; do not edit. Recorded from the test suite by ``python -m tests.dynamo_shapes``
(see ``ibi_tools/local/tables/contract.py``).
"""

# ruff: noqa: E501

STORE_SHAPES: tuple[str, ...] = (
    "BatchGetItem",
    "DeleteItem ConditionExpression(=)",
    "GetItem",
    "GetItem ProjectionExpression",
    "PutItem",
    "PutItem ConditionExpression(<,=,AND,OR,attribute_not_exists)",
    "PutItem ConditionExpression(=,AND)",
    "PutItem ConditionExpression(attribute_not_exists)",
    "Query ExclusiveStartKey IndexName KeyConditionExpression(=) Limit",
    "Query IndexName KeyConditionExpression(<=,=,AND) Limit",
    "Query IndexName KeyConditionExpression(=) Limit",
    "Query IndexName KeyConditionExpression(=,>=,AND) Limit",
    "Query IndexName KeyConditionExpression(=,AND,BETWEEN) Limit",
    "Query KeyConditionExpression(<,=,AND) Limit ScanIndexForward=False",
    "Query KeyConditionExpression(<=,=,AND) Limit ScanIndexForward=False",
    "Query KeyConditionExpression(=) Limit",
    "Query KeyConditionExpression(=) Limit ScanIndexForward=False",
    "Query KeyConditionExpression(=,>,AND) Limit",
    "Query KeyConditionExpression(=,>=,AND) Limit",
    "Query KeyConditionExpression(=,AND)",
    "Scan",
    "Scan ExclusiveStartKey FilterExpression(AND,attribute_exists,attribute_not_exists) Limit",
    "Scan ExclusiveStartKey FilterExpression(attribute_exists) Limit",
    "Scan FilterExpression(AND,attribute_exists,attribute_not_exists) Limit",
    "Scan FilterExpression(attribute_exists)",
    "Scan FilterExpression(attribute_exists) Limit",
    "UpdateItem ConditionExpression(<,OR,attribute_not_exists) ReturnValues=ALL_OLD ReturnValuesOnConditionCheckFailure=ALL_OLD UpdateExpression(ADD,SET,if_not_exists)",
    "UpdateItem ConditionExpression(<,OR,attribute_not_exists) ReturnValues=ALL_OLD UpdateExpression(SET)",
    "UpdateItem ConditionExpression(<=,OR,attribute_not_exists) ReturnValues=ALL_NEW UpdateExpression(SET)",
    "UpdateItem ConditionExpression(<>,AND,OR,attribute_exists,attribute_not_exists) ReturnValues=UPDATED_NEW UpdateExpression(ADD)",
    "UpdateItem ConditionExpression(=) ReturnValues=ALL_OLD ReturnValuesOnConditionCheckFailure=ALL_OLD UpdateExpression(ADD,SET,if_not_exists)",
    "UpdateItem ConditionExpression(=) UpdateExpression(REMOVE,SET)",
    "UpdateItem ConditionExpression(=) UpdateExpression(SET)",
    "UpdateItem ConditionExpression(=,OR,attribute_not_exists) ReturnValues=UPDATED_OLD ReturnValuesOnConditionCheckFailure=ALL_OLD UpdateExpression(SET)",
    "UpdateItem ConditionExpression(>) ReturnValues=ALL_NEW UpdateExpression(ADD)",
    "UpdateItem ConditionExpression(attribute_exists) UpdateExpression(SET)",
    "UpdateItem ConditionExpression(attribute_not_exists) ReturnValues=ALL_OLD ReturnValuesOnConditionCheckFailure=ALL_OLD UpdateExpression(ADD,SET,if_not_exists)",
    "UpdateItem UpdateExpression(ADD)",
    "UpdateItem UpdateExpression(SET)",
    "UpdateItem UpdateExpression(SET,if_not_exists)",
)
