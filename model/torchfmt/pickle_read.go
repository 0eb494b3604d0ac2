package torchfmt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// unpickler is a small pickle stack machine for state-dict pickles. Like torch's
// weights_only unpickler it only resolves an allowlist of globals and only calls
// the few functions a state dict needs; anything else is an error, so a hostile
// file can make it fail but never execute anything.
type unpickler struct {
	data    []byte
	pos     int
	stack   []any
	marks   []int
	memo    map[int64]any
	persist func(pid pyTuple) (any, error)
}

var errPickleTrunc = errors.New("pickle data ends early")

// unpickle runs data to STOP and returns the single resulting object.
func unpickle(data []byte, persist func(pyTuple) (any, error)) (any, error) {
	u := &unpickler{data: data, memo: map[int64]any{}, persist: persist}
	for {
		if u.pos >= len(u.data) {
			return nil, fmt.Errorf("pickle: no STOP opcode: %w", errPickleTrunc)
		}
		at := u.pos
		op := u.data[u.pos]
		u.pos++
		if op == opStop {
			if len(u.stack) != 1 || len(u.marks) != 0 {
				return nil, fmt.Errorf("pickle: STOP at byte %d with %d objects and %d marks on the stack, want 1 and 0", at, len(u.stack), len(u.marks))
			}
			return u.stack[0], nil
		}
		if err := u.step(op); err != nil {
			return nil, fmt.Errorf("pickle: opcode 0x%02x at byte %d: %w", op, at, err)
		}
	}
}

// step executes one opcode.
func (u *unpickler) step(op byte) error {
	switch op {
	case opProto:
		_, err := u.bytes(1)
		return err
	case opFrame:
		_, err := u.bytes(8) // frames only help buffering; contents follow inline
		return err
	case opMark:
		u.marks = append(u.marks, len(u.stack))
		return nil
	case opPop:
		_, err := u.pop()
		return err
	case opPopMark:
		_, err := u.popMark()
		return err
	case opDup:
		v, err := u.top()
		if err == nil {
			u.push(v)
		}
		return err
	}
	if done, err := u.stepScalar(op); done {
		return err
	}
	if done, err := u.stepContainer(op); done {
		return err
	}
	if done, err := u.stepMemo(op); done {
		return err
	}
	if done, err := u.stepObject(op); done {
		return err
	}
	return fmt.Errorf("opcode not supported in a state-dict pickle")
}

// stepScalar handles opcodes that push a constant.
func (u *unpickler) stepScalar(op byte) (bool, error) {
	var v any
	var err error
	switch op {
	case opNone:
		v = nil
	case opNewTrue:
		v = true
	case opNewFalse:
		v = false
	case opBinInt:
		v, err = u.uint(4)
		if err == nil {
			v = int64(int32(v.(uint64)))
		}
	case opBinInt1:
		v, err = u.uint(1)
		if err == nil {
			v = int64(v.(uint64))
		}
	case opBinInt2:
		v, err = u.uint(2)
		if err == nil {
			v = int64(v.(uint64))
		}
	case opLong1, opLong4:
		v, err = u.long(op)
	case opInt:
		v, err = u.textInt()
	case opBinFloat:
		var b []byte
		b, err = u.bytes(8)
		if err == nil {
			v = math.Float64frombits(binary.BigEndian.Uint64(b))
		}
	case opBinUnicode, opShortBinUnicode, opBinUnicode8, opBinString, opShortBinString:
		v, err = u.sized(op)
		if err == nil {
			v = string(v.([]byte))
		}
	case opBinBytes, opShortBinBytes, opBinBytes8:
		v, err = u.sized(op)
	default:
		return false, nil
	}
	if err == nil {
		u.push(v)
	}
	return true, err
}

// sized reads a length-prefixed byte string.
func (u *unpickler) sized(op byte) ([]byte, error) {
	width := 4
	switch op {
	case opShortBinUnicode, opShortBinString, opShortBinBytes:
		width = 1
	case opBinUnicode8, opBinBytes8:
		width = 8
	}
	n, err := u.uint(width)
	if err != nil {
		return nil, err
	}
	if n > uint64(len(u.data)-u.pos) {
		return nil, fmt.Errorf("string of %d bytes runs past the end: %w", n, errPickleTrunc)
	}
	b, _ := u.bytes(int(n))
	out := make([]byte, len(b))
	copy(out, b)
	return out, nil
}

// long decodes LONG1/LONG4: little-endian two's complement, up to 8 bytes here.
func (u *unpickler) long(op byte) (int64, error) {
	width := 1
	if op == opLong4 {
		width = 4
	}
	n, err := u.uint(width)
	if err != nil {
		return 0, err
	}
	if n > 8 {
		return 0, fmt.Errorf("integer of %d bytes does not fit in int64", n)
	}
	b, err := u.bytes(int(n))
	if err != nil || n == 0 {
		return 0, err
	}
	var x uint64
	for i := len(b) - 1; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	shift := 64 - 8*uint(n)
	return int64(x<<shift) >> shift, nil // sign-extend
}

// textInt decodes protocol-0 INT, where "00" and "01" stand for False and True.
func (u *unpickler) textInt() (any, error) {
	line, err := u.line()
	if err != nil {
		return nil, err
	}
	switch line {
	case "00":
		return false, nil
	case "01":
		return true, nil
	}
	v, err := strconv.ParseInt(line, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("bad INT %q", line)
	}
	return v, nil
}

// stepContainer handles tuple, list and dict construction.
func (u *unpickler) stepContainer(op byte) (bool, error) {
	switch op {
	case opEmptyTuple:
		u.push(pyTuple{})
	case opTuple1, opTuple2, opTuple3:
		n := int(op-opTuple1) + 1
		if len(u.stack)-n < u.floor() {
			return true, fmt.Errorf("stack underflow: TUPLE%d needs %d objects", n, n)
		}
		t := make(pyTuple, n)
		copy(t, u.stack[len(u.stack)-n:])
		u.stack = u.stack[:len(u.stack)-n]
		u.push(t)
	case opTuple:
		items, err := u.popMark()
		if err != nil {
			return true, err
		}
		u.push(pyTuple(items))
	case opEmptyList:
		u.push(&pyList{})
	case opList:
		items, err := u.popMark()
		if err != nil {
			return true, err
		}
		u.push(&pyList{items: items})
	case opEmptyDict:
		u.push(newDict())
	case opDict:
		items, err := u.popMark()
		if err != nil {
			return true, err
		}
		d := newDict()
		u.push(d)
		return true, setPairs(d, items)
	case opAppend, opAppends:
		return true, u.appends(op)
	case opSetItem, opSetItems:
		return true, u.setItems(op)
	default:
		return false, nil
	}
	return true, nil
}

func (u *unpickler) appends(op byte) error {
	var items []any
	var err error
	if op == opAppend {
		var v any
		v, err = u.pop()
		items = []any{v}
	} else {
		items, err = u.popMark()
	}
	if err != nil {
		return err
	}
	top, err := u.top()
	if err != nil {
		return err
	}
	l, ok := top.(*pyList)
	if !ok {
		return fmt.Errorf("can only append to a list, not %s", typeName(top))
	}
	l.items = append(l.items, items...)
	return nil
}

func (u *unpickler) setItems(op byte) error {
	var items []any
	var err error
	if op == opSetItem {
		items, err = u.popN(2)
	} else {
		items, err = u.popMark()
	}
	if err != nil {
		return err
	}
	top, err := u.top()
	if err != nil {
		return err
	}
	d, ok := top.(*pyDict)
	if !ok {
		return fmt.Errorf("can only set items of a dict, not %s", typeName(top))
	}
	return setPairs(d, items)
}

func setPairs(d *pyDict, items []any) error {
	if len(items)%2 != 0 {
		return fmt.Errorf("odd number (%d) of dict keys and values", len(items))
	}
	for i := 0; i < len(items); i += 2 {
		if err := d.set(items[i], items[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// stepMemo handles the memo: PUT/GET in their text, 1-byte, 4-byte and implicit forms.
func (u *unpickler) stepMemo(op byte) (bool, error) {
	var idx int64
	var err error
	switch op {
	case opPut, opGet:
		var line string
		if line, err = u.line(); err == nil {
			if idx, err = strconv.ParseInt(line, 10, 64); err != nil {
				err = fmt.Errorf("bad memo index %q", line)
			}
		}
	case opBinPut, opBinGet:
		var x uint64
		x, err = u.uint(1)
		idx = int64(x)
	case opLongBinPut, opLongBinGet:
		var x uint64
		x, err = u.uint(4)
		idx = int64(x)
	case opMemoize:
		idx = int64(len(u.memo))
	default:
		return false, nil
	}
	if err != nil {
		return true, err
	}
	switch op {
	case opGet, opBinGet, opLongBinGet:
		v, ok := u.memo[idx]
		if !ok {
			return true, fmt.Errorf("memo slot %d is empty", idx)
		}
		u.push(v)
	default:
		v, err := u.top()
		if err != nil {
			return true, err
		}
		u.memo[idx] = v
	}
	return true, nil
}

// stepObject handles globals, calls, BUILD and persistent ids.
func (u *unpickler) stepObject(op byte) (bool, error) {
	switch op {
	case opGlobal:
		mod, err := u.line()
		if err != nil {
			return true, err
		}
		name, err := u.line()
		if err != nil {
			return true, err
		}
		return true, u.pushGlobal(mod, name)
	case opStackGlobal:
		items, err := u.popN(2)
		if err != nil {
			return true, err
		}
		mod, ok1 := items[0].(string)
		name, ok2 := items[1].(string)
		if !ok1 || !ok2 {
			return true, fmt.Errorf("STACK_GLOBAL needs two str, got %s and %s", typeName(items[0]), typeName(items[1]))
		}
		return true, u.pushGlobal(mod, name)
	case opReduce:
		return true, u.reduce()
	case opNewObj:
		return true, fmt.Errorf("NEWOBJ (creating class instances) is not allowed in a state dict")
	case opBuild:
		return true, u.build()
	case opBinPersID:
		return true, u.persistent()
	}
	return false, nil
}

func (u *unpickler) pushGlobal(mod, name string) error {
	full := mod + "." + name
	if !allowedGlobal(full) {
		return fmt.Errorf("global %s is not allowed in a state dict (only collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and torch.{Float,Half,BFloat16,Long}Storage)", full)
	}
	u.push(pyGlobal{full})
	return nil
}

// reduce calls one of the allowed functions with a tuple of arguments.
func (u *unpickler) reduce() error {
	a, err := u.pop()
	if err != nil {
		return err
	}
	args, ok := a.(pyTuple)
	if !ok {
		return fmt.Errorf("REDUCE arguments must be a tuple, got %s", typeName(a))
	}
	f, err := u.top()
	if err != nil {
		return err
	}
	g, _ := f.(pyGlobal)
	var v any
	switch g.full {
	case gOrderedDict:
		if len(args) != 0 {
			return fmt.Errorf("collections.OrderedDict called with %d arguments, want 0", len(args))
		}
		v = newDict()
	case gRebuildTensorV2:
		v, err = rebuildTensor(args)
	case gRebuildParam:
		v, err = rebuildParameter(args)
	default:
		return fmt.Errorf("cannot call %s", typeName(f))
	}
	if err != nil {
		return err
	}
	u.stack[len(u.stack)-1] = v
	return nil
}

// build applies BUILD, which torch.save emits to attach an OrderedDict's attributes
// (the state dict's _metadata of module versions); we accept and drop them.
func (u *unpickler) build() error {
	if _, err := u.pop(); err != nil {
		return err
	}
	inst, err := u.top()
	if err != nil {
		return err
	}
	if _, ok := inst.(*pyDict); !ok {
		return fmt.Errorf("BUILD is only allowed on an OrderedDict, not %s", typeName(inst))
	}
	return nil
}

func (u *unpickler) persistent() error {
	v, err := u.pop()
	if err != nil {
		return err
	}
	pid, ok := v.(pyTuple)
	if !ok {
		return fmt.Errorf("persistent id must be a tuple, got %s", typeName(v))
	}
	if u.persist == nil {
		return fmt.Errorf("persistent id found but no storages available")
	}
	obj, err := u.persist(pid)
	if err != nil {
		return err
	}
	u.push(obj)
	return nil
}

// Stack and input helpers.

func (u *unpickler) push(v any) { u.stack = append(u.stack, v) }

// floor is the stack height below which the innermost mark protects objects.
func (u *unpickler) floor() int {
	if len(u.marks) == 0 {
		return 0
	}
	return u.marks[len(u.marks)-1]
}

func (u *unpickler) pop() (any, error) {
	if len(u.stack) <= u.floor() {
		return nil, fmt.Errorf("stack underflow")
	}
	v := u.stack[len(u.stack)-1]
	u.stack = u.stack[:len(u.stack)-1]
	return v, nil
}

func (u *unpickler) popN(n int) ([]any, error) {
	if len(u.stack)-n < u.floor() {
		return nil, fmt.Errorf("stack underflow: need %d objects", n)
	}
	items := append([]any(nil), u.stack[len(u.stack)-n:]...)
	u.stack = u.stack[:len(u.stack)-n]
	return items, nil
}

func (u *unpickler) top() (any, error) {
	if len(u.stack) <= u.floor() {
		return nil, fmt.Errorf("stack underflow")
	}
	return u.stack[len(u.stack)-1], nil
}

func (u *unpickler) popMark() ([]any, error) {
	if len(u.marks) == 0 {
		return nil, fmt.Errorf("no MARK on the stack")
	}
	m := u.marks[len(u.marks)-1]
	u.marks = u.marks[:len(u.marks)-1]
	items := append([]any(nil), u.stack[m:]...)
	u.stack = u.stack[:m]
	return items, nil
}

func (u *unpickler) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(u.data)-u.pos {
		return nil, errPickleTrunc
	}
	b := u.data[u.pos : u.pos+n]
	u.pos += n
	return b, nil
}

func (u *unpickler) uint(width int) (uint64, error) {
	b, err := u.bytes(width)
	if err != nil {
		return 0, err
	}
	var x uint64
	for i := width - 1; i >= 0; i-- {
		x = x<<8 | uint64(b[i])
	}
	return x, nil
}

// line reads up to a newline (GLOBAL names and protocol-0 arguments).
func (u *unpickler) line() (string, error) {
	i := strings.IndexByte(string(u.data[u.pos:min(len(u.data), u.pos+256)]), '\n')
	if i < 0 {
		return "", fmt.Errorf("no newline within 256 bytes: %w", errPickleTrunc)
	}
	s := string(u.data[u.pos : u.pos+i])
	u.pos += i + 1
	return s, nil
}
