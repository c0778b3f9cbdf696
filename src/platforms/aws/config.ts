/**
 * The AWS platform's part of the install config: `platform.aws` (region, network,
 * credentials file) and each pool's `platform.aws` (instance type, image, volume,
 * profile), their computed defaults, rules, and the credentials-file checks.
 */
import { stat } from 'node:fs/promises';
import type { Infer, Loose, PlatformConfigSection, Rule, SchemaProblem } from '../../config/index.js';
import { cidrString, cidrsOverlap, computed, defaulted, machineSection, optional, parseCidr, platformSection, required, resolveConfigPath, s, soundPools } from '../../config/index.js';

export const awsName = 'aws';

/** IAM instance profiles that `clusterawsadm bootstrap iam` creates. */
const awsControlPlaneInstanceProfile = 'control-plane.cluster-api-provider-aws.sigs.k8s.io';
const awsNodeInstanceProfile = 'nodes.cluster-api-provider-aws.sigs.k8s.io';

/** CAPA's default VPC block when none is given. */
const awsDefaultVpcCidr = '10.0.0.0/16';

/** Where the AWS CLI keeps credentials; the default of `credentials.file`. */
export const awsDefaultCredentialsFile = '~/.aws/credentials';

const instanceTypePattern = /^[a-z0-9-]+\.[a-z0-9-]+$/;
const amiPattern = /^ami-[0-9a-f]{8,17}$/;
const subnetPattern = /^subnet-[0-9a-f]{8,17}$/;

const credentialsHint = 'credentials are never written into the install config: reference a credentials file with platform.aws.credentials.file';

const awsMachineSchema = s.object(
  {
    instanceType: computed(
      s.string({ doc: 'EC2 instance type.', pattern: instanceTypePattern, patternHint: 'an EC2 instance type such as t3.large or m6i.xlarge', examples: ['t3.large'] }),
      'platform.aws.defaultInstanceType',
    ),
    rootVolumeSize: defaulted(s.integer({ doc: 'Root volume size in GiB.', minimum: 8, maximum: 16384 }), 80),
    ami: optional(s.string({ doc: 'AMI id of the machine image. Default: platform.aws.ami when set; otherwise the provider looks an image up for the Kubernetes version.', pattern: amiPattern, patternHint: 'an AMI id such as ami-0123456789abcdef0' })),
    subnet: optional(s.string({ doc: 'Subnet to place the machines in; one of platform.aws.subnets.', pattern: subnetPattern, patternHint: 'a subnet id such as subnet-0123456789abcdef0' })),
    iamInstanceProfile: computed(s.string({ doc: 'IAM instance profile of the machines.', minLength: 1 }), `the profiles clusterawsadm creates: ${awsControlPlaneInstanceProfile} for control-plane pools, ${awsNodeInstanceProfile} otherwise`),
  },
  { doc: 'Machine settings of the AWS platform.' },
);

export const awsPlatformSchema = s.object(
  {
    region: required(s.string({ doc: 'AWS region.', pattern: /^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d+$/, patternHint: 'a region such as us-east-1', examples: ['us-east-1'] })),
    defaultInstanceType: defaulted(s.string({ doc: 'Instance type of pools that do not set one.', pattern: instanceTypePattern, patternHint: 'an EC2 instance type such as t3.large' }), 't3.large'),
    ami: optional(s.string({ doc: 'AMI id for all pools that do not set one. Default: the provider looks an image up for the Kubernetes version.', pattern: amiPattern, patternHint: 'an AMI id such as ami-0123456789abcdef0' })),
    sshKeyName: optional(s.string({ doc: 'Name of an EC2 key pair to install on every machine.', pattern: /^[\x21-\x7e]+([\x20-\x7e]*[\x21-\x7e]+)*$/, patternHint: 'printable ASCII, not starting or ending with a space' })),
    vpcID: optional(s.string({ doc: 'An existing VPC to use. Default: the provider creates a VPC.', pattern: /^vpc-[0-9a-f]{8,17}$/, patternHint: 'a VPC id such as vpc-0123456789abcdef0' })),
    vpcCIDR: optional(cidrString('CIDR of the VPC the provider creates (ignored with vpcID). Default: the provider\'s 10.0.0.0/16.')),
    subnets: optional(
      s.array(s.string({ doc: 'A subnet id.', pattern: subnetPattern, patternHint: 'a subnet id such as subnet-0123456789abcdef0' }), {
        doc: 'Existing subnets to use (with vpcID). Default: the provider creates subnets.',
        minItems: 1,
        unique: true,
        rules: ['subnets and vpcID go together: set both or neither.'],
      }),
    ),
    credentials: defaulted(
      s.object(
        {
          file: defaulted(s.string({ doc: 'Path of an AWS shared credentials file; relative paths are relative to the install directory; `~` is your home.', minLength: 1, format: 'path' }), awsDefaultCredentialsFile),
          profile: defaulted(s.string({ doc: 'Profile in the credentials file.', minLength: 1 }), 'default'),
        },
        { doc: 'Where the AWS credentials are: a file reference, never the keys themselves.', unknownFieldHints: { accessKeyID: credentialsHint, secretAccessKey: credentialsHint, accessKeyId: credentialsHint, sessionToken: credentialsHint } },
      ),
      {},
    ),
    endpointURL: optional(
      s.string({
        doc: 'Base URL of every AWS API the provider calls, given to it as AWS_ENDPOINT_URL: a proxy, a private endpoint or an AWS API simulator. Default: AWS\'s public endpoints of the region.',
        pattern: /^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/,
        patternHint: 'an http(s) URL such as https://aws-proxy.example.com',
        examples: ['https://aws-proxy.example.com'],
      }),
    ),
    additionalTags: optional(s.map(s.string({ doc: 'Tag value.', maxLength: 256 }), { doc: 'Tags added to every AWS resource the provider creates.' })),
  },
  {
    doc: 'The AWS platform (Cluster API Provider AWS).',
    unknownFieldHints: { accessKeyID: credentialsHint, secretAccessKey: credentialsHint, accessKeyId: credentialsHint },
  },
);

export type AwsPlatform = Infer<typeof awsPlatformSchema>;

/** What the typed accessors need: the section's key and schema. */
const awsSectionRef = { name: awsName, schema: awsPlatformSchema, machineSchema: awsMachineSchema };
export type AwsMachine = Infer<typeof awsMachineSchema>;

const rules: Rule[] = [
  {
    name: 'aws-vpc-and-subnets',
    reads: ['platform'],
    check(config, report) {
      const aws = platformSection(config, awsSectionRef);
      if (!aws) return;
      if (aws.subnets && !aws.vpcID) {
        report.error(['platform', 'aws', 'vpcID'], 'subnets are set but vpcID is not', 'existing subnets belong to an existing VPC: set vpcID to it, or remove subnets to let the provider create both');
      }
      if (aws.vpcID && !aws.subnets) {
        report.error(['platform', 'aws', 'subnets'], 'vpcID is set but subnets are not', 'list the subnets of the VPC to use, or remove vpcID to let the provider create a VPC');
      }
      if (aws.vpcID && aws.vpcCIDR) {
        report.error(['platform', 'aws', 'vpcCIDR'], 'vpcCIDR applies only to a VPC the provider creates; vpcID names an existing one', 'remove vpcCIDR, or remove vpcID and subnets');
      }
    },
  },
  {
    name: 'aws-vpc-cidr-disjoint',
    reads: ['platform', 'networking'],
    check(config, report) {
      const aws = platformSection(config, awsSectionRef);
      if (!aws || aws.vpcID) return;
      const vpc = parseCidr(aws.vpcCIDR ?? awsDefaultVpcCidr);
      if (!vpc.ok) return;
      const lists = { podCIDRs: config.networking.podCIDRs, serviceCIDRs: config.networking.serviceCIDRs };
      for (const [field, list] of Object.entries(lists)) {
        list.forEach((text, index) => {
          const other = parseCidr(text);
          if (other.ok && cidrsOverlap(vpc.cidr, other.cidr)) {
            const at = aws.vpcCIDR ? ['platform', 'aws', 'vpcCIDR'] : ['networking', field, index];
            report.error(at, `the VPC block ${vpc.cidr.text} overlaps networking.${field}[${index}] (${text})`, 'machine, pod and service networks must be disjoint');
          }
        });
      }
    },
  },
  {
    name: 'aws-pool-subnet-known',
    reads: ['platform'],
    check(config, report) {
      const aws = platformSection(config, awsSectionRef);
      if (!aws?.subnets) return;
      soundPools(config, report).forEach(({ pool, index }) => {
        const subnet = machineSection(pool, awsSectionRef)?.subnet;
        if (subnet && !aws.subnets?.includes(subnet)) {
          report.error(['machinePools', index, 'platform', 'aws', 'subnet'], `${subnet} is not one of platform.aws.subnets`, `use one of: ${aws.subnets?.join(', ')}`);
        }
      });
    },
  },
  {
    name: 'aws-ssh-key',
    reads: ['platform'],
    check(config, report) {
      const aws = platformSection(config, awsSectionRef);
      if (aws && !aws.sshKeyName) {
        report.warn(['platform', 'aws', 'sshKeyName'], 'no SSH key: you will not be able to log in to machines to debug them', 'set sshKeyName to an EC2 key pair in the region');
      }
    },
  },
];

export const awsConfig = {
  name: awsName,
  schema: awsPlatformSchema,
  machineSchema: awsMachineSchema,
  rules,
  providerNamespaces: ['capa-system'],

  machineDefaults(machine: Loose, { section, roles }: { section: Loose; roles: readonly unknown[] }) {
    machine.instanceType ??= section.defaultInstanceType;
    if (machine.ami === undefined && section.ami !== undefined) machine.ami = section.ami;
    machine.iamInstanceProfile ??= roles.includes('controlPlane') ? awsControlPlaneInstanceProfile : awsNodeInstanceProfile;
  },

  /** The credentials file should exist and be private; only warnings: manifests can be made and reviewed without it. */
  async checkFiles(config, dir) {
    const warnings: SchemaProblem[] = [];
    const credentials = platformSection(config, awsSectionRef)?.credentials;
    if (credentials && typeof credentials.file === 'string') {
      const at = ['platform', 'aws', 'credentials', 'file'];
      const resolved = resolveConfigPath(dir, credentials.file);
      const info = await stat(resolved).catch(() => undefined);
      if (!info?.isFile()) {
        warnings.push({ path: at, message: `credentials file ${resolved} does not exist; create cluster will need it`, hint: 'create it with `aws configure`, or point credentials.file at your AWS shared credentials file' });
      } else if ((info.mode & 0o077) !== 0) {
        warnings.push({ path: at, message: `${resolved} is readable by other users (mode ${(info.mode & 0o777).toString(8)})`, hint: `run chmod 600 ${resolved}` });
      }
    }
    return { errors: [], warnings };
  },
} satisfies PlatformConfigSection;
