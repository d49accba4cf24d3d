/**
 * The package's public surface, read from its declaration files with TypeScript's checker: the symbols the entry
 * points export (through `export * as Ns` too), and every type of this package a public declaration names that no
 * entry point exports (a "forgotten export": a user could meet the type and not name it).
 */
import { relative } from "node:path"
import ts from "typescript"

export interface Surface {
  /** Per entry point, its exports; a namespace as `Ns.member`. */
  readonly exports: ReadonlyMap<string, ReadonlyArray<string>>
  /** `Type (declared in file, named by a public declaration of Name)`. */
  readonly forgotten: ReadonlyArray<string>
  /** Public values that are layers, or functions returning one, by their public names. */
  readonly layers: ReadonlyArray<string>
}

export const readSurface = (dist: string, entries: ReadonlyArray<string>): Surface => {
  const files = entries.map((e) => `${dist}/${e}`)
  const program = ts.createProgram(files, { noEmit: true, skipLibCheck: true, strict: true })
  const checker = program.getTypeChecker()
  const ours = (decl: ts.Declaration) => !relative(dist, decl.getSourceFile().fileName).startsWith("..")
  const resolve = (s: ts.Symbol) => ((s.flags & ts.SymbolFlags.Alias) !== 0 ? checker.getAliasedSymbol(s) : s)

  const exported = new Set<ts.Symbol>()
  const public_: Array<[ts.Symbol, string]> = []
  const exports = new Map<string, Array<string>>()
  const addModule = (module: ts.Symbol, prefix: string, names: Array<string>) => {
    for (const member of checker.getExportsOfModule(module)) {
      const target = resolve(member)
      const name = prefix + member.name
      const isModule = (target.flags & ts.SymbolFlags.ValueModule) !== 0 &&
        (target.declarations ?? []).some(ts.isSourceFile)
      if (isModule) {
        if (exported.has(target)) continue
        exported.add(target)
        addModule(target, `${name}.`, names)
        continue
      }
      names.push(name)
      exported.add(target)
      public_.push([target, name])
      // A namespace merged with the export (`RunService.Service`) is exported with it.
      target.exports?.forEach((inner) => {
        exported.add(resolve(inner))
        public_.push([resolve(inner), `${name}.${inner.name}`])
      })
    }
  }
  for (const file of files) {
    const source = program.getSourceFile(file)
    const module = source === undefined ? undefined : checker.getSymbolAtLocation(source)
    const names: Array<string> = []
    if (module !== undefined) addModule(module, "", names)
    exports.set(relative(dist, file), names)
  }

  // Like API Extractor: a forgotten type is reported where it is named, its own members are not walked.
  const forgotten = new Set<string>()
  const walk = (symbol: ts.Symbol, via: string) => {
    for (const decl of symbol.declarations ?? []) {
      if (!ours(decl)) continue
      const visit = (node: ts.Node): void => {
        // Private members are declared without their types: nothing to name.
        if (ts.canHaveModifiers(node) && ts.getModifiers(node)?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword)) {
          return
        }
        const named = ts.isTypeReferenceNode(node) ? node.typeName
          : ts.isExpressionWithTypeArguments(node) ? node.expression
          : ts.isTypeQueryNode(node) ? node.exprName
          : ts.isImportTypeNode(node) ? node.qualifier
          : undefined
        const at = named === undefined ? undefined : checker.getSymbolAtLocation(named)
        if (at !== undefined) {
          const target = resolve(at)
          const local = (target.declarations ?? []).filter(ours)
          // Type parameters and the declaration's own members are named where they are declared.
          const isParam = (target.flags & ts.SymbolFlags.TypeParameter) !== 0
          // `X_base` is the declaration emit's own name for a class's `extends` expression.
          const emitted = target.name.endsWith("_base")
          if (local.length > 0 && !isParam && !emitted && target !== symbol && !exported.has(target)) {
            const file = relative(dist, local[0]?.getSourceFile().fileName ?? "")
            forgotten.add(`${target.name} (${file}, named by ${via})`)
          }
        }
        ts.forEachChild(node, visit)
      }
      // A namespace's or module's body is walked through its exports, not here.
      if (ts.isSourceFile(decl) || ts.isModuleDeclaration(decl)) continue
      visit(decl)
    }
  }
  for (const [symbol, name] of public_) walk(symbol, name)
  const isLayer = (type: ts.Type): boolean => type.getSymbol()?.getName() === "Layer" ||
    type.getCallSignatures().some((sig) => sig.getReturnType().getSymbol()?.getName() === "Layer")
  const layers = public_.flatMap(([symbol, name]) => {
    const decl = symbol.valueDeclaration
    return decl !== undefined && ours(decl) && isLayer(checker.getTypeOfSymbolAtLocation(symbol, decl)) ? [name] : []
  })
  return { exports, forgotten: [...forgotten].sort(), layers: [...new Set(layers)].sort() }
}
