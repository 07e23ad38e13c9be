"""Creates a deployment in a moto server, as the stack would have made it, for doctor's tests.

Forgets what the server held, then reads JSON on standard input: {"endpoint": URL, "deployment": {...}, "parked": N,
"secrets": {name: text}, "cluster": bool}, where "deployment" is the stand-ins' Deployment
(tests/standins/src/deployment.rs) built from the transformed template and broken one way
by the test. Everything is made with boto3, so moto answers doctor as botocore's service
models say AWS does. Prints what it made: {"function_arn": ..., "secret_arns": [...]}.

    .venv-moto/bin/python scripts/moto_deployment.py < case.json
"""

import io
import json
import sys
import urllib.request
import zipfile

import boto3


def package(machine):
    """A deployment package: a zip holding `bootstrap`, an ELF header for `machine`."""
    elf = bytearray(64)
    elf[:4] = b"\x7fELF"
    elf[4], elf[5] = 2, 1
    elf[18:20] = machine.to_bytes(2, "little")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bootstrap", bytes(elf))
    return buffer.getvalue()


def arn_name(arn):
    return arn.split(":")[5].split("/")[-1]


def main():
    case = json.load(sys.stdin)
    # What the previous case made is forgotten first.
    reset = urllib.request.Request(case["endpoint"] + "/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=30).read()
    d = case["deployment"]
    region = d["dead_letter_queue"].split(":")[3]
    client = lambda service: boto3.client(
        service,
        region_name=region,
        endpoint_url=case["endpoint"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    iam, lam, sqs, sns = client("iam"), client("lambda"), client("sqs"), client("sns")
    events, ecr, eks, secrets = client("events"), client("ecr"), client("eks"), client("secretsmanager")

    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
             "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
    role = iam.create_role(RoleName=arn_name(d["role_arn"]),
                           AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]

    for queue in d["queues"]:
        url = sqs.create_queue(QueueName=arn_name(queue))["QueueUrl"]
        # One call: moto forgets a queue's Policy on any call that does not repeat it.
        attributes = {}
        policy = d["queue_policies"].get(queue)
        if policy is not None:
            attributes["Policy"] = json.dumps(policy)
        allow = d["redrive_allow_policies"].get(queue)
        if allow is not None:
            attributes["RedriveAllowPolicy"] = json.dumps(allow)
        if attributes:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    destination = d.get("on_failure") or ""
    if destination.startswith("arn:aws:sns:") and case.get("topic", True):
        sns.create_topic(Name=arn_name(destination))

    if case.get("alarm_topic", True):
        topic = sns.create_topic(Name="argocd-ecr-updater-alarms")["TopicArn"]
        sns.subscribe(TopicArn=topic, Protocol="email", Endpoint="oncall@example.com")

    made_secrets = [secrets.create_secret(Name=name, SecretString=text)["ARN"]
                    for name, text in case.get("secrets", {}).items()]
    environment = dict(d["environment"])
    if made_secrets:
        listed = [a for a in environment.get("GIT_CREDENTIALS_SECRET_ARNS", "").split(",") if a]
        environment["GIT_CREDENTIALS_SECRET_ARNS"] = ",".join(listed + made_secrets)

    # A VPC function: a private subnet whose 0.0.0.0/0 goes to a NAT gateway ("nat") or,
    # wrongly for Lambda, to the internet gateway ("igw").
    vpc_config = {}
    if case.get("vpc"):
        ec2 = client("ec2")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        public = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
        private = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24")["Subnet"]["SubnetId"]
        igw = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
        address = ec2.allocate_address(Domain="vpc")["AllocationId"]
        nat = ec2.create_nat_gateway(SubnetId=public, AllocationId=address)["NatGateway"]["NatGatewayId"]
        table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
        target = {"NatGatewayId": nat} if case["vpc"] == "nat" else {"GatewayId": igw}
        ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", **target)
        ec2.associate_route_table(RouteTableId=table, SubnetId=private)
        group = ec2.create_security_group(GroupName="argocd-ecr-updater", Description="function",
                                          VpcId=vpc)["GroupId"]
        vpc_config = {"VpcConfig": {"SubnetIds": [private], "SecurityGroupIds": [group]}}

    function = lam.create_function(
        FunctionName=d["function_name"], Runtime="provided.al2023", Handler="bootstrap",
        Role=role, Code={"ZipFile": package(d["binary_machine"])},
        Architectures=[d["architecture"]], Environment={"Variables": environment},
        Tags={"aws:cloudformation:stack-name": d["stack_name"],
              "aws:cloudformation:logical-id": "Function"},
        **vpc_config)
    function_arn = function["FunctionArn"]
    if destination:
        lam.put_function_event_invoke_config(
            FunctionName=d["function_name"], MaximumRetryAttempts=2,
            MaximumEventAgeInSeconds=3600,
            DestinationConfig={"OnFailure": {"Destination": destination}})
    for mapping in d["event_source_mappings"]:
        scaling = ({"ScalingConfig": {"MaximumConcurrency": mapping["maximum_concurrency"]}}
                   if mapping["maximum_concurrency"] else {})
        lam.create_event_source_mapping(
            EventSourceArn=mapping["queue_arn"], FunctionName=d["function_name"],
            BatchSize=mapping["batch_size"], Enabled=mapping["state"] == "Enabled",
            FunctionResponseTypes=["ReportBatchItemFailures"], **scaling)
    if d["reserved_concurrency"] is not None:
        lam.put_function_concurrency(FunctionName=d["function_name"],
                                     ReservedConcurrentExecutions=d["reserved_concurrency"])
    for permission in d["permissions"]:
        extra = {"SourceArn": permission["source_arn"]} if permission["source_arn"] else {}
        lam.add_permission(FunctionName=d["function_name"],
                           StatementId=permission["statement_id"],
                           Action=permission["action"], Principal=permission["principal"],
                           **extra)

    for name, rule in d["rules"].items():
        shape = ({"EventPattern": json.dumps(rule["pattern"])} if rule["pattern"] is not None
                 else {"ScheduleExpression": rule["schedule"]})
        events.put_rule(Name=name, State="ENABLED" if rule["enabled"] else "DISABLED", **shape)
        targets = []
        for target in rule["targets"]:
            made = {"Id": target["id"], "Arn": target["arn"],
                    "RetryPolicy": {"MaximumRetryAttempts": 8, "MaximumEventAgeInSeconds": 3600}}
            if target["dead_letter_queue"]:
                made["DeadLetterConfig"] = {"Arn": target["dead_letter_queue"]}
            targets.append(made)
        if targets:
            events.put_targets(Rule=name, Targets=targets)

    account = function_arn.split(":")[4]
    for repository in d["repositories"].get(account, []):
        mutable = repository in d["mutable_repositories"]
        ecr.create_repository(repositoryName=repository,
                              imageTagMutability="MUTABLE" if mutable else "IMMUTABLE")

    if case.get("cluster", True):
        eks.create_cluster(
            name=environment["CLUSTER_NAME"], roleArn=role,
            resourcesVpcConfig={"subnetIds": ["subnet-0a"],
                                "endpointPublicAccess": d["endpoint_public"],
                                "endpointPrivateAccess": d["endpoint_private"],
                                "publicAccessCidrs": ["0.0.0.0/0"] if d["endpoint_public"] else []},
            accessConfig={"authenticationMode": d["authentication_mode"] or "CONFIG_MAP"})

    parked = case.get("parked", 0)
    if parked:
        url = sqs.get_queue_url(QueueName=arn_name(d["dead_letter_queue"]))["QueueUrl"]
        for n in range(parked):
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"parked": n}))

    json.dump({"function_arn": function_arn, "secret_arns": made_secrets}, sys.stdout)


if __name__ == "__main__":
    main()
