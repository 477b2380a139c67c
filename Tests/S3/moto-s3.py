#!/usr/bin/env python3
"""moto's S3 (and IAM) server on 127.0.0.1 with signature checking on, for S3Tests.

Usage: moto-s3.py LOG BUCKET KEY=FILE...

Binds a free port, creates an IAM user allowed s3:GetObject/s3:ListBucket and an access key for
it, the bucket, and each object KEY with the bytes of FILE; then turns authentication on (every
request must be signed with a key that IAM knows, and the signature must match) and prints one
line to stdout: `READY PORT ACCESS_KEY_ID SECRET_ACCESS_KEY`. Each request after that is logged to
LOG, one line each: `METHOD PATH STATUS RANGE AUTH` (RANGE: the Range header or `-`; AUTH:
`signed` when an AWS4-HMAC-SHA256 Authorization header came, else `unsigned`). Serves until stdin
closes.
"""
import json
import sys
import threading

import boto3
from moto import settings
from moto.core.authorization import ActionAuthenticatorMixin
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server


def main() -> None:
    log_path, bucket, objects = sys.argv[1], sys.argv[2], [a.split("=", 1) for a in sys.argv[3:]]
    log = open(log_path, "a", buffering=1)
    logging_on = threading.Event()
    app = DomainDispatcherApplication(create_backend_app)

    def logged(environ, start_response):
        def start(status, headers, exc_info=None):
            if logging_on.is_set():
                auth = environ.get("HTTP_AUTHORIZATION", "")
                log.write("%s %s %s %s %s\n" % (environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), status.split()[0],
                                                environ.get("HTTP_RANGE", "-").replace(" ", ""),
                                                "signed" if auth.startswith("AWS4-HMAC-SHA256 ") else "unsigned"))
            return start_response(status, headers, exc_info)
        return app(environ, start)

    server = make_server("127.0.0.1", 0, logged, threaded=True, request_handler=MotoRequestHandler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()

    endpoint = "http://127.0.0.1:%d" % port
    setup = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="setup", aws_secret_access_key="setup")
    iam = boto3.client("iam", **setup)
    iam.create_user(UserName="spoolfetch")
    iam.put_user_policy(UserName="spoolfetch", PolicyName="read", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket", "s3:PutObject"], "Resource": "*"}]}))
    key = iam.create_access_key(UserName="spoolfetch")["AccessKey"]
    s3 = boto3.client("s3", **setup)
    s3.create_bucket(Bucket=bucket)
    for name, path in objects:
        with open(path, "rb") as body:
            s3.put_object(Bucket=bucket, Key=name, Body=body)

    # Authentication from now on: moto checks each request's signature against IAM's keys.
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    logging_on.set()
    print("READY %d %s %s" % (port, key["AccessKeyId"], key["SecretAccessKey"]), flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
