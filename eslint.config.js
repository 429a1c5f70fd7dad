// ESLint for the HLO graph viewer (tpukit/graph/assets/*.js); `make lint` runs it.
//
// The viewer's files are plain scripts that _graph_view.py joins into one <script> per
// output (no modules, no bundler: the output must work offline and in Colab's sandboxed
// iframes). So each file names what it takes from the others in a `/* global ... */`
// comment and what it offers in `/* exported ... */`: no-undef and no-unused-vars then
// check every file's stated interface against its code, and tpukit/viewer-scope
// (scripts/eslint_viewer_scope.js) checks the files against each other: no top-level name
// twice in the joined scope, and every name a file takes offered by another.
const js = require("@eslint/js");
const globals = require("globals");
const viewerScope = require("./scripts/eslint_viewer_scope.js");

module.exports = [
  {ignores: ["node_modules/", "tpukit/graph/assets/dagre.min.js", ".venv*/", "build/", "out/"]},
  js.configs.recommended,
  {
    files: ["tpukit/**/*.js"],
    languageOptions: {
      ecmaVersion: 2020,
      sourceType: "script",
      globals: {...globals.browser},
    },
    linterOptions: {reportUnusedDisableDirectives: "error"},
    plugins: {tpukit: {rules: {"viewer-scope": viewerScope}}},
    rules: {
      "tpukit/viewer-scope": "error",
      "no-undef": "error",
      "no-unused-vars": ["error", {vars: "all", args: "none"}],
      "eqeqeq": ["error", "always"],
      "no-var": "off",
      "no-implicit-globals": "off",
      "no-shadow": ["error", {builtinGlobals: false}],
      "no-use-before-define": ["error", {functions: false, variables: false}],
      "no-redeclare": ["error", {builtinGlobals: true}],
      "no-implied-eval": "error",
      "no-eval": "error",
      "no-new-func": "error",
      "no-new-wrappers": "error",
      "no-throw-literal": "error",
      "no-self-compare": "error",
      "no-unmodified-loop-condition": "error",
      "no-unreachable-loop": "error",
      "no-template-curly-in-string": "error",
      "no-caller": "error",
      "no-proto": "error",
      "no-extend-native": "error",
      "no-return-assign": "error",
      "no-sequences": "error",
      "no-useless-concat": "error",
      "no-lone-blocks": "error",
      "radix": "error",
      "strict": ["error", "global"],
      "consistent-return": "off",
      "curly": "off",
    },
  },
  {
    files: ["eslint.config.js", "scripts/*.js"],
    languageOptions: {sourceType: "commonjs", globals: {...globals.node}},
  },
];
