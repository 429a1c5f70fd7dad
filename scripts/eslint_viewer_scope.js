// An ESLint rule for the HLO graph viewer's scripts (tpukit/graph/assets/*.js), which the page
// joins into one function scope: what one file declares at its top level, every other file
// sees. ESLint reads one file at a time, so this rule reads the files beside the one it
// checks and reports:
//   - a top-level name that another viewer file also declares (the later would replace it);
//   - a name in the file's `/* global ... */` comment (what it takes) that no other viewer
//     file names in its `/* exported ... */` comment (what it offers);
//   - a name in `/* exported ... */` that the file does not declare at its top level;
//   - a top-level assignment to another file's object (`GraphView.prototype.x = ...` outside
//     graph_view.js): each part's fields and methods are set in its own file only.
// no-undef and no-unused-vars then hold each file to those two comments.
"use strict";

const fs = require("fs");
const path = require("path");
const espree = require("espree");

const SKIP = new Set(["dagre.min.js"]);
const PARSE = {ecmaVersion: 2020, sourceType: "script", comment: true, loc: true};

// The names a `/* global */` or `/* exported */` comment lists, with where it is.
function listed(comments, kind) {
  const out = [];
  for (const comment of comments) {
    if (comment.type !== "Block") continue;
    const match = new RegExp("^\\s*" + kind + "\\s+([\\s\\S]*)$").exec(comment.value);
    if (!match) continue;
    for (const item of match[1].split(/[\s,]+/)) {
      const name = item.split(":")[0];
      if (name) out.push({name, comment});
    }
  }
  return out;
}

function topLevel(program) {
  const names = [];
  for (const node of program.body) {
    if (node.type === "FunctionDeclaration" && node.id) names.push({name: node.id.name, node});
    if (node.type === "VariableDeclaration") {
      for (const decl of node.declarations) {
        if (decl.id.type === "Identifier") names.push({name: decl.id.name, node: decl});
      }
    }
  }
  return names;
}

// The object a top-level `A.b... = value` statement writes into (A), or null.
function assignedObject(statement) {
  if (statement.type !== "ExpressionStatement" || statement.expression.type !== "AssignmentExpression") return null;
  let target = statement.expression.left;
  if (target.type !== "MemberExpression") return null;
  while (target.type === "MemberExpression") target = target.object;
  return target.type === "Identifier" ? target : null;
}

// Every other viewer file's top-level names and offers, read once per file and change.
const cache = new Map();
function others(filename) {
  const dir = path.dirname(filename), result = {declared: new Map(), offered: new Set()};
  for (const name of fs.readdirSync(dir).sort()) {
    const file = path.join(dir, name);
    if (!name.endsWith(".js") || SKIP.has(name) || file === filename) continue;
    const text = fs.readFileSync(file, "utf8");
    let parsed = cache.get(file);
    if (!parsed || parsed.text !== text) {
      const program = espree.parse(text, PARSE);
      parsed = {
        text,
        declared: topLevel(program).map((d) => d.name),
        offered: listed(program.comments, "exported").map((d) => d.name),
      };
      cache.set(file, parsed);
    }
    for (const n of parsed.declared) result.declared.set(n, name);
    for (const n of parsed.offered) result.offered.add(n);
  }
  return result;
}

module.exports = {
  meta: {
    type: "problem",
    docs: {description: "the viewer's files share one scope: no name twice, take only what another offers"},
    schema: [],
  },
  create(context) {
    const filename = context.filename;
    if (SKIP.has(path.basename(filename))) return {};
    return {
      Program(program) {
        const comments = context.sourceCode.getAllComments();
        const seen = others(filename);
        const mine = topLevel(program);
        const declaredHere = new Set(mine.map((d) => d.name));
        for (const {name, node} of mine) {
          if (seen.declared.has(name)) {
            context.report({node, message: `'${name}' is also declared at the top of ${seen.declared.get(name)}; the files share one scope.`});
          }
        }
        for (const {name, comment} of listed(comments, "global")) {
          if (!seen.offered.has(name)) {
            context.report({loc: comment.loc, message: `takes '${name}', which no other viewer file offers (/* exported */).`});
          }
        }
        for (const statement of program.body) {
          const target = assignedObject(statement);
          if (target && !declaredHere.has(target.name)) {
            context.report({node: statement, message: `sets a field of '${target.name}', which another file declares; a part's fields are set in its own file.`});
          }
        }
        for (const {name, comment} of listed(comments, "exported")) {
          if (!declaredHere.has(name)) {
            context.report({loc: comment.loc, message: `offers '${name}', which this file does not declare at its top level.`});
          }
        }
      },
    };
  },
};
