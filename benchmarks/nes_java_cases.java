// The structural cases of `waferline eval-nes` for Java, found by javac's own attribution (the compiler tree API,
// com.sun.source), independently of the tree-sitter code under test (server/features/next_edit/lexical_java_c.py,
// signature_declared.py):
//
//	java benchmarks/nes_java_cases.java FILE...   (a JDK 17: the source launcher compiles this file itself)
//
// The files are parsed and attributed together, as one compilation (imports the files do not hold are errors,
// counted). Printed, one JSON line a file: {file, renames: {skipped, candidates}, added: {skipped, candidates}},
// offsets in chars (UTF-16 units: javac's). benchmarks/nes_cases_declared.py makes the cases.
//
// Renames: for each variable a method, constructor, lambda, initializer block or their nested classes declare
// (javac's element kinds PARAMETER: kind "parameter"; LOCAL_VARIABLE, EXCEPTION_PARAMETER, RESOURCE_VARIABLE,
// BINDING_VARIABLE: "local"), the candidate's locations are every identifier javac resolves to that element
// (`Trees.getElement` of an IdentifierTree; a field access `x.f` is a MemberSelectTree, never one). The declaration's
// name is found in the text after its type (its first whole-word occurrence in the declaration). A candidate is left
// out when its method holds a compile error (the attribution there may be lost), when an identifier of that name in
// its method resolves to nothing, or when a use comes before the declaration: [{kind, name, start, locations}].
// Mentions in comments and strings are not edits.
//
// Added parameters: a private method (so every call is in its file) gets a parameter added at the end, `TYPE NAME`
// as a parameter of every method calling it spells it (the callers pass their own variable), and the intended file
// passes NAME as the last argument of every call. Taken only when javac resolves every mention of the method to a
// call: each identifier, member select or method reference whose element is the method is a call's method name;
// the method is the only one of its name in the file, has parameters and no varargs, and no identifier of NAME in
// its body (a field it reads would be shadowed); each call's enclosing method has that parameter, of one type
// (javac's) and one spelling across the callers, with no type variable in it (the method may not see it); no
// method with a compile error takes part; and the intended file has no more compile errors than the file (javac
// again, the file beside its package tree's other sources): [{function, at, text, variable, calls}], `text` typed
// at `at` (after the last parameter), `, NAME` inserted at each of `calls` (after each call's last argument).

import com.sun.source.tree.*;
import com.sun.source.util.*;
import java.io.File;
import java.util.*;
import java.util.regex.*;
import javax.lang.model.element.*;
import javax.lang.model.type.*;
import javax.tools.*;

public class nes_java_cases {
    record Decl(String kind, String name, int start, Element element, long fnStart, long fnEnd, CompilationUnitTree unit) {}

    record Call(MethodInvocationTree call, MethodTree caller) {}

    public static void main(String[] args) throws Exception {
        JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        StandardJavaFileManager fm = compiler.getStandardFileManager(diagnostics, null, null);
        List<File> files = new ArrayList<>();
        for (String a : args) files.add(new File(a).getAbsoluteFile());
        JavacTask task = (JavacTask) compiler.getTask(null, fm, diagnostics,
                List.of("-proc:none", "-Xlint:none", "-implicit:none", "-Xmaxerrs", "100000"), null,
                fm.getJavaFileObjectsFromFiles(files));
        Iterable<? extends CompilationUnitTree> units = task.parse();
        task.analyze();
        Trees trees = Trees.instance(task);
        SourcePositions pos = trees.getSourcePositions();
        Map<String, List<Long>> errors = new HashMap<>();
        for (Diagnostic<? extends JavaFileObject> d : diagnostics.getDiagnostics()) {
            if (d.getKind() == Diagnostic.Kind.ERROR && d.getSource() != null) {
                errors.computeIfAbsent(new File(d.getSource().toUri()).getPath(), k -> new ArrayList<>()).add(d.getPosition());
            }
        }
        int errorCount = errors.values().stream().mapToInt(List::size).sum();
        System.err.println(files.size() + " files, " + errorCount + " compile errors");
        for (CompilationUnitTree unit : units) {
            String path = new File(unit.getSourceFile().toUri()).getPath();
            String text = unit.getSourceFile().getCharContent(true).toString();
            List<Long> fileErrors = errors.getOrDefault(path, List.of());
            System.out.println("{\"file\":\"" + path.replace("\\", "\\\\").replace("\"", "\\\"") + "\",\"renames\":"
                    + renames(unit, trees, pos, text, fileErrors) + ",\"added\":" + added(unit, trees, pos, text, fileErrors) + "}");
        }
    }

    /** {skipped, candidates} as JSON. */
    static String json(Map<String, Integer> skipped, List<String> candidates) {
        StringBuilder out = new StringBuilder("{\"skipped\":{");
        int i = 0;
        for (Map.Entry<String, Integer> s : skipped.entrySet()) {
            out.append(i++ == 0 ? "" : ",").append("\"").append(s.getKey()).append("\":").append(s.getValue());
        }
        return out.append("},\"candidates\":[").append(String.join(",", candidates)).append("]}").toString();
    }

    static String renames(CompilationUnitTree unit, Trees trees, SourcePositions pos, String text, List<Long> fileErrors) {
        List<Decl> decls = new ArrayList<>();
        Map<Element, List<Long>> uses = new HashMap<>();
        Map<String, Integer> skipped = new TreeMap<>();
        List<long[]> unresolved = new ArrayList<>(); // [position, name hash]
        List<String> unresolvedNames = new ArrayList<>();
        new TreePathScanner<Void, long[]>() {
            @Override
            public Void visitMethod(MethodTree m, long[] fn) {
                return super.visitMethod(m, new long[] {pos.getStartPosition(unit, m), pos.getEndPosition(unit, m)});
            }

            @Override
            public Void visitBlock(BlockTree b, long[] fn) {
                if (fn == null) fn = new long[] {pos.getStartPosition(unit, b), pos.getEndPosition(unit, b)};
                return super.visitBlock(b, fn);
            }

            @Override
            public Void visitVariable(VariableTree v, long[] fn) {
                Element e = trees.getElement(getCurrentPath());
                if (e != null && fn != null) {
                    String kind = switch (e.getKind()) {
                        case PARAMETER -> "parameter";
                        case LOCAL_VARIABLE, EXCEPTION_PARAMETER, RESOURCE_VARIABLE, BINDING_VARIABLE -> "local";
                        default -> null;
                    };
                    int at = nameAt(text, v, unit, pos);
                    if (kind != null && at >= 0) decls.add(new Decl(kind, v.getName().toString(), at, e, fn[0], fn[1], unit));
                    else if (kind != null) skipped.merge("declaration's name not found", 1, Integer::sum);
                }
                return super.visitVariable(v, fn);
            }

            @Override
            public Void visitIdentifier(IdentifierTree id, long[] fn) {
                Element e = trees.getElement(getCurrentPath());
                long at = pos.getStartPosition(unit, id);
                if (e == null) {
                    unresolved.add(new long[] {at});
                    unresolvedNames.add(id.getName().toString());
                } else {
                    uses.computeIfAbsent(e, k -> new ArrayList<>()).add(at);
                }
                return super.visitIdentifier(id, fn);
            }
        }.scan(unit, null);
        List<String> candidates = new ArrayList<>();
        decls.sort(Comparator.comparingInt(Decl::start));
        for (Decl d : decls) {
            if (fileErrors.stream().anyMatch(p -> d.fnStart() <= p && p < d.fnEnd())) {
                skipped.merge("a compile error in the method", 1, Integer::sum);
                continue;
            }
            boolean lost = false;
            for (int i = 0; i < unresolved.size(); i++) {
                long p = unresolved.get(i)[0];
                if (unresolvedNames.get(i).equals(d.name()) && d.fnStart() <= p && p < d.fnEnd()) lost = true;
            }
            if (lost) {
                skipped.merge("an identifier of that name resolved to nothing", 1, Integer::sum);
                continue;
            }
            List<Long> locations = new ArrayList<>(uses.getOrDefault(d.element(), List.of()));
            Collections.sort(locations);
            if (!locations.isEmpty() && locations.get(0) < d.start()) {
                skipped.merge("a use before the declaration", 1, Integer::sum);
                continue;
            }
            if (locations.stream().anyMatch(p -> p < 0 || !text.startsWith(d.name(), (int) (long) p))) {
                skipped.merge("a use's text is not the name", 1, Integer::sum);
                continue;
            }
            StringBuilder locs = new StringBuilder();
            for (Long p : locations) locs.append(locs.length() == 0 ? "" : ",").append(p);
            candidates.add("{\"kind\":\"" + d.kind() + "\",\"name\":\"" + d.name() + "\",\"start\":" + d.start()
                    + ",\"locations\":[" + locs + "]}");
        }
        return json(skipped, candidates);
    }

    static String added(CompilationUnitTree unit, Trees trees, SourcePositions pos, String text, List<Long> fileErrors) {
        Map<Element, MethodTree> methods = new LinkedHashMap<>();
        Map<String, Integer> names = new HashMap<>();
        Map<Element, List<Call>> calls = new HashMap<>();
        Map<Element, Integer> mentions = new HashMap<>();
        new TreePathScanner<Void, MethodTree>() {
            @Override
            public Void visitMethod(MethodTree m, MethodTree outer) {
                Element e = trees.getElement(getCurrentPath());
                if (e != null) {
                    methods.put(e, m);
                    names.merge(m.getName().toString(), 1, Integer::sum);
                }
                return super.visitMethod(m, m);
            }

            @Override
            public Void visitMethodInvocation(MethodInvocationTree call, MethodTree caller) {
                Element e = trees.getElement(new TreePath(getCurrentPath(), call.getMethodSelect()));
                if (e != null && caller != null) calls.computeIfAbsent(e, k -> new ArrayList<>()).add(new Call(call, caller));
                return super.visitMethodInvocation(call, caller);
            }

            @Override
            public Void visitIdentifier(IdentifierTree id, MethodTree caller) {
                mention(trees.getElement(getCurrentPath()));
                return super.visitIdentifier(id, caller);
            }

            @Override
            public Void visitMemberSelect(MemberSelectTree s, MethodTree caller) {
                mention(trees.getElement(getCurrentPath()));
                return super.visitMemberSelect(s, caller);
            }

            @Override
            public Void visitMemberReference(MemberReferenceTree r, MethodTree caller) {
                mention(trees.getElement(getCurrentPath()));
                mention(trees.getElement(getCurrentPath())); // a reference is never a call: counted twice
                return super.visitMemberReference(r, caller);
            }

            void mention(Element e) {
                if (e != null && e.getKind() == ElementKind.METHOD) mentions.merge(e, 1, Integer::sum);
            }
        }.scan(unit, null);
        Map<String, Integer> skipped = new TreeMap<>();
        List<String> candidates = new ArrayList<>();
        for (Map.Entry<Element, MethodTree> entry : methods.entrySet()) {
            Element e = entry.getKey();
            MethodTree m = entry.getValue();
            String why = whyNot(e, m, calls.getOrDefault(e, List.of()), mentions.getOrDefault(e, 0), names, unit, pos,
                    trees, text, fileErrors, candidates);
            if (why != null) skipped.merge(why, 1, Integer::sum);
        }
        return json(skipped, candidates);
    }

    /** The offset of the declaration's name: its first whole word after the type (or the declaration's start). */
    static int nameAt(String text, VariableTree v, CompilationUnitTree unit, SourcePositions pos) {
        long from = pos.getStartPosition(unit, v);
        if (v.getType() != null && pos.getEndPosition(unit, v.getType()) > from) from = pos.getEndPosition(unit, v.getType());
        long end = pos.getEndPosition(unit, v);
        if (from < 0) return -1;
        Matcher m = Pattern.compile("(?<![\\w$])" + Pattern.quote(v.getName().toString()) + "(?![\\w$])").matcher(text);
        if (!m.find((int) from)) return -1;
        return (end < 0 || m.start() < end) ? m.start() : -1;
    }

    static boolean hasError(Tree t, CompilationUnitTree unit, SourcePositions pos, List<Long> errors) {
        long a = pos.getStartPosition(unit, t), b = pos.getEndPosition(unit, t);
        return errors.stream().anyMatch(p -> a <= p && p < b);
    }

    static String whyNot(Element e, MethodTree m, List<Call> calls, int mentions, Map<String, Integer> names,
            CompilationUnitTree unit, SourcePositions pos, Trees trees, String text, List<Long> errors,
            List<String> candidates) {
        if (!m.getModifiers().getFlags().contains(Modifier.PRIVATE) || m.getBody() == null) return "not a private method";
        if (calls.isEmpty()) return "not called in the file";
        if (names.get(m.getName().toString()) != 1) return "another method of its name in the file";
        if (m.getParameters().isEmpty() || ((ExecutableElement) e).isVarArgs()) return "no parameters, or varargs";
        if (mentions != calls.size()) return "a mention of the method that is not a call";
        if (hasError(m, unit, pos, errors)) return "a compile error in the method";
        Set<String> body = new HashSet<>();
        new TreeScanner<Void, Void>() {
            @Override
            public Void visitIdentifier(IdentifierTree id, Void v) {
                body.add(id.getName().toString());
                return null;
            }
        }.scan(m.getBody(), null);
        Map<String, Set<String>> spelled = null; // parameter name: its declarations' texts
        Map<String, Set<String>> typed = new HashMap<>();
        Set<MethodTree> callers = new LinkedHashSet<>();
        for (Call c : calls) callers.add(c.caller());
        for (MethodTree caller : callers) {
            if (caller == m || hasError(caller, unit, pos, errors)) return "a recursive call, or a caller with an error";
            Map<String, Set<String>> own = new HashMap<>();
            for (VariableTree p : caller.getParameters()) {
                String n = p.getName().toString();
                own.computeIfAbsent(n, k -> new HashSet<>()).add(text.substring((int) pos.getStartPosition(unit, p),
                        (int) pos.getEndPosition(unit, p)).replaceAll("\\s+", " "));
                TypeMirror t = trees.getTypeMirror(TreePath.getPath(unit, p));
                typed.computeIfAbsent(n, k -> new HashSet<>()).add(t == null || mentionsTypeVariable(t) ? "?" : t.toString());
            }
            if (spelled == null) spelled = own;
            else {
                spelled.keySet().retainAll(own.keySet());
                for (String n : spelled.keySet()) spelled.get(n).addAll(own.get(n));
            }
        }
        for (String n : new TreeSet<>(spelled.keySet())) {
            if (body.contains(n) || spelled.get(n).size() != 1 || typed.get(n).size() != 1 || typed.get(n).contains("?")) continue;
            String decl = spelled.get(n).iterator().next();
            if (decl.contains("@") || decl.contains("...") || !decl.endsWith(" " + n)) continue;
            List<String> at = new ArrayList<>();
            for (Call c : calls) {
                List<? extends ExpressionTree> a = c.call().getArguments();
                if (a.size() != m.getParameters().size()) return "a call's arguments differ from the parameters";
                at.add(Long.toString(pos.getEndPosition(unit, a.get(a.size() - 1))));
            }
            List<? extends VariableTree> ps = m.getParameters();
            long end = pos.getEndPosition(unit, ps.get(ps.size() - 1));
            String intended = text;
            List<Long> inserts = new ArrayList<>();
            for (String x : at) inserts.add(Long.parseLong(x));
            inserts.add(end);
            inserts.sort(Comparator.reverseOrder());
            for (long x : inserts) {
                String put = x == end ? ", " + decl : ", " + n;
                intended = intended.substring(0, (int) x) + put + intended.substring((int) x);
            }
            if (errorCount(unit, intended) > errorCount(unit, text)) return "the intended file does not compile";
            candidates.add("{\"function\":\"" + m.getName() + "\",\"at\":" + end + ",\"text\":\", " + decl.replace("\\", "\\\\")
                    .replace("\"", "\\\"") + "\",\"variable\":\"" + n + "\",\"calls\":[" + String.join(",", at) + "]}");
            return null;
        }
        return "no parameter that every caller has";
    }

    static final Map<String, Integer> ERRORS = new HashMap<>(); // a text's errors, computed once

    /** The compile errors of the file's text beside the other sources of its package tree (on the sourcepath). */
    static int errorCount(CompilationUnitTree unit, String intended) {
        return ERRORS.computeIfAbsent(intended, t -> compileErrors(unit, t));
    }

    static int compileErrors(CompilationUnitTree unit, String intended) {
        File file = new File(unit.getSourceFile().toUri());
        File root = file.getParentFile();
        if (unit.getPackageName() != null) {
            for (String part : unit.getPackageName().toString().split("\\.")) root = root.getParentFile();
        }
        JavaFileObject source = new SimpleJavaFileObject(file.toURI(), JavaFileObject.Kind.SOURCE) {
            @Override
            public CharSequence getCharContent(boolean ignoreEncodingErrors) {
                return intended;
            }
        };
        JavaCompiler compiler = ToolProvider.getSystemJavaCompiler();
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        JavacTask task = (JavacTask) compiler.getTask(null, compiler.getStandardFileManager(null, null, null),
                diagnostics, List.of("-proc:none", "-implicit:none", "-Xlint:none", "-sourcepath", root.getPath()),
                null, List.of(source));
        try {
            task.analyze();
        } catch (java.io.IOException ex) {
            return Integer.MAX_VALUE;
        }
        return (int) diagnostics.getDiagnostics().stream().filter(d -> d.getKind() == Diagnostic.Kind.ERROR).count();
    }

    static boolean mentionsTypeVariable(TypeMirror t) {
        if (t.getKind() == TypeKind.TYPEVAR || t.getKind() == TypeKind.WILDCARD) return true;
        if (t instanceof ArrayType a) return mentionsTypeVariable(a.getComponentType());
        if (t instanceof DeclaredType d) return d.getTypeArguments().stream().anyMatch(nes_java_cases::mentionsTypeVariable);
        return false;
    }
}
