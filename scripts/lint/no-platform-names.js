// An ESLint plugin with one rule, `no-platform-names`: a file it applies to must not name a
// platform, in code, strings or comments (a module that explains what a platform does knows
// it). eslint.config.js applies it to src/ outside src/platforms/, tests excepted, with the
// names src/platforms/forbidden-names.ts derives from the registry.

/** The words of a token: split at camelCase humps (`AWSCluster` → aws, cluster), lower case. */
function wordsOf(token) {
  return token
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .split(' ')
    .map((word) => word.toLowerCase());
}

/**
 * Every place `text` names a platform: `{ index, length, name }`, in order. `words` match whole words
 * of any case, `names` as written anywhere; what `allowedWords` lists is let through (a name
 * only when all of its words are).
 */
export function platformNamesIn(text, { words, names, allowedWords = [] }) {
  const forbiddenWords = new Set(words.filter((word) => !allowedWords.includes(word)));
  const found = [];
  for (const token of text.matchAll(/[A-Za-z0-9]+/g)) {
    const word = wordsOf(token[0]).find((w) => forbiddenWords.has(w));
    if (word) found.push({ index: token.index, length: token[0].length, name: word });
  }
  for (const name of names) {
    const nameWords = name.split(/[^A-Za-z0-9]+/).filter(Boolean).flatMap(wordsOf);
    if (nameWords.every((w) => allowedWords.includes(w))) continue;
    for (let at = text.indexOf(name); at !== -1; at = text.indexOf(name, at + 1)) found.push({ index: at, length: name.length, name });
  }
  return found.sort((a, b) => a.index - b.index);
}

const noPlatformNames = {
  meta: {
    type: 'problem',
    docs: { description: 'Outside src/platforms/, reach platforms through the registry: never name one' },
    schema: [
      {
        type: 'object',
        properties: {
          words: { type: 'array', items: { type: 'string' } },
          names: { type: 'array', items: { type: 'string' } },
          allowedWords: { type: 'array', items: { type: 'string' } },
        },
        required: ['words', 'names'],
        additionalProperties: false,
      },
    ],
    messages: {
      named: '"{{name}}" names a platform: move this into src/platforms/<name>/ behind the Platform interface (docs/architecture.md, "Platforms").',
    },
  },
  create(context) {
    const source = context.sourceCode;
    return {
      Program(node) {
        for (const { index, length, name } of platformNamesIn(source.text, context.options[0])) {
          context.report({ node, loc: { start: source.getLocFromIndex(index), end: source.getLocFromIndex(index + length) }, messageId: 'named', data: { name } });
        }
      },
    };
  },
};

export default { meta: { name: 'provisioner' }, rules: { 'no-platform-names': noPlatformNames } };
