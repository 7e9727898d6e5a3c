"""Confluent's client against es's registry over TLS with --auth required.

REGISTRY_URL is https://..., CA_PEM the CA that signed the broker's
certificate, USER_INFO a key with read and write on subjects prefixed
`orders-` as `<id>:<key>`, WRONG_USER_INFO the same id with a wrong key.
"""

import json
import os

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

URL = os.environ["REGISTRY_URL"]
CA = os.environ["CA_PEM"]
V1 = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


def client(user_info):
    return SchemaRegistryClient({"url": URL, "ssl.ca.location": CA, "basic.auth.user.info": user_info})


def error_of(fn):
    try:
        fn()
    except SchemaRegistryError as e:
        return e
    raise AssertionError("expected a SchemaRegistryError")


passed = 0
sr = client(os.environ["USER_INFO"])
assert sr.register_schema("orders-value", Schema(V1, "AVRO")) == 1
assert json.loads(client(os.environ["USER_INFO"]).get_schema(1).schema_str) == json.loads(V1)
passed += 1
print("ok 1: register and get over https with basic.auth.user.info", flush=True)

ctx = SerializationContext("orders", MessageField.VALUE)
data = AvroSerializer(sr, V1)({"id": 7}, ctx)
assert AvroDeserializer(client(os.environ["USER_INFO"]))(data, ctx) == {"id": 7}
passed += 1
print("ok 2: AvroSerializer and AvroDeserializer over https", flush=True)

e = error_of(lambda: client(os.environ["WRONG_USER_INFO"]).get_subjects())
assert (e.http_status_code, e.error_code) == (401, 40101), (e.http_status_code, e.error_code)
e = error_of(lambda: client(os.environ["USER_INFO"]).register_schema("payments-value", Schema(V1, "AVRO")))
assert (e.http_status_code, e.error_code) == (403, 40301), (e.http_status_code, e.error_code)
passed += 1
print("ok 3: a wrong key is 401 40101, a subject outside the grant 403 40301", flush=True)
print(f"registry tls: {passed} passed, 0 failed", flush=True)
